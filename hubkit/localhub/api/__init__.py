"""The Hub API by endpoint family: repos, files (resolve, trees, paths-info), commits and preupload
(upload), classic LFS, Collections; and the README metadata the repos and upload families read (cards).
Xet's CAS API is in `localhub.xet.api`."""
