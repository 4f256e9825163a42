# A baseline deployed to every account of ou-root (child OUs included)
# except one, with production accounts overridden.
stack_set "baseline" {
  template         = "./templates/baseline"
  permission_model = "SERVICE_MANAGED"
  call_identity    = "DELEGATED_ADMIN"

  vars = {
    retention_days = 30
    alert_email    = "platform@example.com"
  }

  deployment_targets {
    regions              = ["eu-west-1", "us-east-1"]
    organizational_units = ["ou-root"]
    account_filter_type  = "DIFFERENCE"
    accounts             = ["666666666666"]
  }

  # Production keeps logs longer; the alert address stays the stack set's.
  instance_override {
    organizational_units = ["ou-prod"]
    vars                 = { retention_days = 365 }
    use_stack_set_vars   = ["alert_email"]
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }
}
