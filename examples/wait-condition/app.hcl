# Workers that must report in: every release replaces the wait condition
# (its triggers), each worker signals its handle URL when it is up, and the
# load balancer config — which needs the workers' addresses from the
# signals — is written only after all of them did. The workers themselves
# are updated two at a time, keeping at least two unchanged in service.
#
# Try it with the daemon serving signals (the workers use curl):
#   stackd run --repo . --listen 127.0.0.1:7070 --external-url http://127.0.0.1:7070
stack_set "workers" {
  template = "./templates/app"
  vars     = { version = "2.0.1", workers = 4 }

  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111", "222222222222"]
  }

  # Each batch of instances completes only when its wait conditions got
  # their signals; a timeout fails the instance and rolls the batch back.
  rollout {
    batch_size = 1
    on_failure = "rollback"
  }
}
