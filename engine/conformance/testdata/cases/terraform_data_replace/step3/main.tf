variable "revision" {
  type    = number
  default = 2
}

variable "payload" {
  type    = string
  default = "two"
}

resource "terraform_data" "d" {
  input            = { payload = var.payload }
  triggers_replace = [var.revision]
}

output "payload" { value = terraform_data.d.output.payload }
