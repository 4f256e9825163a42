variable "n" {
  type    = number
  default = 3
}

resource "terraform_data" "c" {
  count = var.n
  input = "item-${count.index}"
}

resource "terraform_data" "none" {
  count = 0
  input = "never"
}

resource "terraform_data" "maybe" {
  count = var.n > 2 ? 1 : 0
  input = terraform_data.c[*].input
}

output "inputs" { value = terraform_data.c[*].input }
output "maybe" { value = one(terraform_data.maybe[*].input) }
output "count" { value = length(terraform_data.c) }
