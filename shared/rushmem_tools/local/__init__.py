"""Running the deployed functions on this machine: the handlers from template.yaml in-process
(:mod:`.runtime`, the Docker-free ``sam local invoke``), the HTTP API on localhost (:mod:`.server`)
and the demo (:mod:`.demo`). Not part of the Lambda layer."""
