"""The cluster's metadata as this broker serves it: the single broker's own image, and formatting
the log dirs that hold it."""
