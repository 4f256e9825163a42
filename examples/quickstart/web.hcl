# The quickstart stack set: one template deployed to 3 regions x 2 accounts.
stack_set "web" {
  description = "frontend configuration"
  template    = "./templates/web"

  vars = {
    image    = "nginx:1.25"
    replicas = 2
    # Sensitive in the template: never printed in plans, logs or status.
    api_key = "demo-secret-key"
  }

  deployment_targets {
    regions  = ["eu-west-1", "us-east-1", "ap-south-1"]
    accounts = ["111111111111", "222222222222"]
  }

  operation_preferences {
    region_concurrency_type = "SEQUENTIAL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }
}
