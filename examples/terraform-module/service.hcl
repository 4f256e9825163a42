# A template written as an ordinary Terraform root module (templates/service:
# *.tf files, terraform.tfvars, a local module called with for_each, providers
# implied by resource types) deployed unchanged to 2 regions x 2 accounts.
# `terraform init && terraform plan` in templates/service plans the same
# resources; stackd adds the targets, the rollout and the change sets.
stack_set "service" {
  description = "billing services, named by a null-label style module"
  template    = "./templates/service"

  # Wins over templates/service/terraform.tfvars, as -var does in Terraform.
  vars = {
    environment = "prod"
  }

  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111", "222222222222"]
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    failure_tolerance_count = 0
  }
}
