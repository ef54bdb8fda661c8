//! Devices, buffers, compile and launch, caches, and ndarray interop.
