"""Runner-specific code at the edge: fixes to a Beam runner that fleetgrade's graph needs, kept
apart from the graph itself so that each can be offered upstream and dropped later."""
