variable "tier" { type = string }
variable "cidr" { type = string }
variable "zones" { type = list(string) }
variable "public" { type = bool }

locals {
  subnets = { for i, z in var.zones : z => cidrsubnet(var.cidr, 2, i) }
}

resource "terraform_data" "subnet" {
  for_each = local.subnets
  input = {
    name       = "${var.tier}-${substr(each.key, -1, 1)}"
    cidr       = each.value
    first_host = cidrhost(each.value, 1)
    netmask    = cidrnetmask(each.value)
    public     = var.public
  }
}

output "subnets" { value = local.subnets }
