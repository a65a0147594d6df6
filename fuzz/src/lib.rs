//! Helpers shared by the fuzz targets: the client's view of NBD replies.

pub mod nbd;
