#!/bin/bash
# The body of `make test-with-field` (what `make test` becomes once the field
# suite is reliable; run after `make deps etcd35`): lints, every unit and
# namespace test, and the field suite, with the slow parts side by side so
# that the wall time is about the cargo build plus the longer of the two test
# groups, not the sum of everything:
#
#   1. the field node images (tests/images/build-node-image.sh, cached under
#      /var/cache/etcd-warden-test/images) are built in the background from the
#      start, while cargo builds: the image build is mostly download and dpkg,
#      the cargo build mostly compiler;
#   2. lints (rustfmt, clippy), the daemon and agent binaries and every test
#      binary (`--no-run`); then, in the field job beside the namespace group,
#      the .deb the field nodes install, built once from the debug binaries
#      (WARDEN_DEB: no field test builds its own);
#   3. the namespace group (every test but the field ones) and the field group
#      (`field_suite`: one cluster per node image and backend, every scenario in
#      order; then `field_three_node`, three nodes for the HA and arbiter
#      runbooks) run at the same time, in two test runs. The field group runs at
#      a lower CPU priority (FIELD_NICE, default 5) so that the namespace
#      cluster tests, whose Corosync token is three times shorter than the
#      field nodes', keep their share of the two cores; its output goes to
#      target/test-logs/field.log and is printed when it ends.
#
# Environment: CARGO (default cargo), FIELD_SUITES (default "trixie bookworm"),
# FIELD_NICE, WARDEN_TEST_FIELD=0 (no field group: the namespace group alone,
# as before the field suite existed), WARDEN_TEST_NS_FILTER and
# WARDEN_TEST_FIELD_FILTER (nextest filter expressions narrowing either group,
# to try the pipeline on a few tests). Exits non-zero when either group fails;
# the last lines name the failed group and each stage's time.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo=${CARGO:-cargo}
suites=${FIELD_SUITES:-trixie bookworm}
field_nice=${FIELD_NICE:-5}
with_field=${WARDEN_TEST_FIELD:-1}
logs=target/test-logs
mkdir -p "$logs"
t0=$(date +%s)
stamp() { echo "make-test: $* at +$(( $(date +%s) - t0 )) s (load $(cut -d' ' -f1-3 /proc/loadavg))"; }
nextest=
if $cargo nextest --version >/dev/null 2>&1; then nextest=1; fi
if [ -n "$nextest" ]; then
    ns=("$cargo" nextest run --workspace --no-fail-fast -E "${WARDEN_TEST_NS_FILTER:-not binary(/^field_/)}")
    # --workspace in both runs: the features cargo unifies are then those of
    # the build above, and neither run rebuilds anything.
    field=("$cargo" nextest run --workspace --no-fail-fast -E "${WARDEN_TEST_FIELD_FILTER:-binary(field_suite) | binary(field_three_node)}")
else
    ns=("$cargo" test --workspace --no-fail-fast -- --skip field_)
    field=("$cargo" test -p warden-integration --test field_suite --test field_three_node --no-fail-fast -- --test-threads=1)
fi

field_pid=
field_rc=0
if [ "$with_field" != 0 ]; then
    # The field job: the images first, then (once this script has built the
    # tests and the package and says "go" on the pipe) the field group. The
    # pipe stays open here until the end, so what is written into it waits
    # for the job however long the images take.
    rm -f "$logs/go.fifo"
    mkfifo "$logs/go.fifo"
    exec 3<>"$logs/go.fifo"
    (
        exec 3<&-
        for s in $suites; do
            s0=$(date +%s)
            if ! tests/images/build-node-image.sh "$s" >/dev/null 2>"$logs/images-$s.log"; then
                cat "$logs/images-$s.log"
                echo "make-test: the $s node image failed to build"
                exit 1
            fi
            cat "$logs/images-$s.log"
            echo "make-test: image $s ready after $(( $(date +%s) - s0 )) s (at +$(( $(date +%s) - t0 )) s)"
        done
        read -r go <"$logs/go.fifo"
        [ "$go" = go ] || exit 1
        # The package the field nodes install, from the debug binaries the
        # other tests run (dist/build-deb.sh strips them, as the release
        # package is). Built here, beside the namespace group, not before it.
        rm -rf target/field-deb
        deb=$PWD/$(dist/build-deb.sh target/debug target/field-deb | tail -n 1)
        echo "make-test: field package $deb built at +$(( $(date +%s) - t0 )) s"
        echo "make-test: field group starts at +$(( $(date +%s) - t0 )) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
        rc=0
        # `flock -o`: the lock is held by flock alone, not inherited by what
        # the tests start, so a node left running by a killed run cannot hold
        # it forever.
        WARDEN_DEB=$deb nice -n "$field_nice" flock -o /tmp/warden-field.lock "${field[@]}" || rc=$?
        echo "make-test: field group ended (status $rc) at +$(( $(date +%s) - t0 )) s"
        exit $rc
    ) >"$logs/field.log" 2>&1 &
    field_pid=$!
    stamp "field job started: node images now, the field group once the tests are built (log: $logs/field.log)"
fi
# On an early exit (a lint or build failure) the field job is told to stop:
# it ends once the image it is building is complete (and cached).
trap '[ -z "$field_pid" ] || { echo stop >&3; wait "$field_pid" || true; }' EXIT

$cargo fmt --all -- --check
$cargo clippy --workspace --all-targets -- -D warnings
stamp "lints done"
# Built first and exactly as tests/integration/src/bins.rs builds them (one
# package each), so that no test spends its time limit building them.
$cargo build -p etcd-warden --bin etcd-warden
$cargo build -p etcd-warden-agent --bin etcd-warden-agent
if [ -n "$nextest" ]; then
    $cargo nextest run --workspace --no-run
else
    $cargo test --workspace --no-run
fi
stamp "tests built"

if [ "$with_field" != 0 ]; then
    echo go >&3
    trap - EXIT
fi

ns_rc=0
stamp "namespace group starts"
"${ns[@]}" || ns_rc=$?
stamp "namespace group ended (status $ns_rc)"

if [ -n "$field_pid" ]; then
    wait "$field_pid" || field_rc=$?
    echo "===== field group (target/test-logs/field.log) ====="
    cat "$logs/field.log"
    stamp "field group ended (status $field_rc)"
fi

[ "$ns_rc" = 0 ] || echo "make-test: FAILED: the namespace group (status $ns_rc)"
[ "$field_rc" = 0 ] || echo "make-test: FAILED: the field group (status $field_rc; log above and in $logs/field.log)"
[ "$ns_rc" = 0 ] && [ "$field_rc" = 0 ]
