//! Table files. (Implementation in progress.)
