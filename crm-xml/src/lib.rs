//! crm-xml
