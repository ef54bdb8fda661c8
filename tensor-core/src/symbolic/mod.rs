//! Index arithmetic simplification.
