"""`dflashctl doctor`: the serving environment and known defects (docs/doctor.md)."""
