"""The Django side of a submission: the pipeline a request goes through, limits, workflows, inserts."""
