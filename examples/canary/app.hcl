# A canary rollout: one instance first, then 2, 4, 8... while at least 2
# instances stay untouched and healthy; each batch must pass its health
# check before the next starts, and a failure rolls every changed instance
# back to the previous revision, newest batch first.
stack_set "app" {
  template = "./templates/app"
  vars     = { version = "1.4.0" }

  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111", "222222222222", "333333333333", "444444444444"]
  }

  operation_preferences {
    region_concurrency_type = "SEQUENTIAL"
    region_order            = ["eu-west-1", "us-east-1"]
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }

  rollout {
    pattern        = "canary"
    batch_size     = 1
    growth_factor  = 2
    min_in_service = 2
    pause          = "30s"     # or "until_promoted": stackd promote app
    on_failure     = "rollback"
    supersede      = false     # true: a newer commit aborts a rollout held until_promoted

    health_check {
      url      = "http://127.0.0.1:8080/healthz/${target.region}/${target.account}?v=${output.version}"
      expect   = 200
      timeout  = "5s"
      interval = "2s"
      healthy  = 3
      deadline = "2m"
    }
  }
}
