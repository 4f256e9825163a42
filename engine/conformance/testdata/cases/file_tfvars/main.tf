variable "a" { type = string }
variable "b" { type = string }
variable "c" { type = list(number) }
variable "d" {
  type    = string
  default = "default"
}

resource "terraform_data" "v" {
  input = [var.a, var.b, var.c, var.d]
}

output "v" { value = terraform_data.v.input }
