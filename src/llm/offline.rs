//! The offline provider.
