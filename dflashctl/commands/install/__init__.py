"""`dflashctl install --host H`: this dflashctl, as a wheel, into a venv on a host."""
