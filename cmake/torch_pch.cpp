// Anchor for the shared precompiled libtorch header.
