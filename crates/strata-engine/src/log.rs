//! Log files (write-ahead logs and manifests): a sequence of checksummed records.
//! (Implementation in progress.)
