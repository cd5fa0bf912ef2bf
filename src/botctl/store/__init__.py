"""Where botctl keeps what it knows between runs: the state file, its lock, saved plans."""
