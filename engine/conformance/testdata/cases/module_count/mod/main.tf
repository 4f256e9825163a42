variable "zone" { type = string }
variable "index" { type = number }

resource "terraform_data" "z" {
  input = "zone-${var.zone}-${var.index}"
}

output "label" { value = terraform_data.z.input }
