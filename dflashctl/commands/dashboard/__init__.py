"""`dflashctl dashboard`: a Grafana dashboard on the alert rules' recording series."""
