"""What the local Hub keeps on disk, without HTTP: the storage root, repositories and their commits and
refs, LFS objects, Collections, the names each accepts, and what storage refuses."""
