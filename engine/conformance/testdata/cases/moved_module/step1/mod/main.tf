variable "name" { type = string }

resource "terraform_data" "r" {
  input = "object ${var.name}"
}

output "id" { value = terraform_data.r.output }
