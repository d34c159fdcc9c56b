"""One reader (and writer) per file format a run or a Hub repo holds."""
