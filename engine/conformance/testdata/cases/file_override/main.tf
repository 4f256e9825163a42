variable "size" {
  type    = number
  default = 1
}

locals {
  name = "base"
  env  = "dev"
}

resource "terraform_data" "o" {
  input            = { name = local.name, env = local.env, size = var.size }
  triggers_replace = "base"
}

output "o" { value = terraform_data.o.input }
