"""The live model's drift and health, worked out from counts: the drift figures and their rule
(`drift`) and the monitor's report (`report`). Reading the counts from the store is
core.intake.monitor's."""
