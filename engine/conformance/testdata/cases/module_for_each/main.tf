locals {
  teams = {
    payments = { members = ["ann", "bob"] }
    search   = { members = ["cy"] }
  }
}

module "team" {
  for_each = local.teams
  source   = "./mod"
  name     = each.key
  members  = each.value.members
}

output "teams" { value = { for k, m in module.team : k => m.summary } }
