# The target inventory of SERVICE_MANAGED stack sets.
organization {
  management_account = "000000000000" # never a deployment target
  delegated_admins   = ["444444444444"]

  organizational_unit "ou-root" {
    accounts = ["000000000000", "111111111111"]

    organizational_unit "ou-prod" {
      accounts = ["222222222222", "333333333333"]
      account "555555555555" { suspended = true } # skipped, never failed
    }

    organizational_unit "ou-dev" {
      accounts = ["444444444444", "666666666666"]
    }
  }
}
