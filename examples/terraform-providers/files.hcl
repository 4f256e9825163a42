# Terraform providers as stackd providers: hashicorp/local writes a file per
# target and hashicorp/random makes a per-target id, driven over the plugin
# protocol — no terraform binary. See README.md beside this file.
stack_set "files" {
  description = "per-target files written by hashicorp/local"
  template    = "./templates/files"

  vars = {
    # Where local_file writes (local's filename is relative to stackd's
    # working directory unless absolute).
    root = "/tmp/stackd-terraform-providers"
  }

  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111", "222222222222"]
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }
}
