variable "revision" {
  type    = number
  default = 1
}

variable "payload" {
  type    = string
  default = "one"
}

resource "terraform_data" "d" {
  input            = { payload = var.payload }
  triggers_replace = [var.revision]
}

output "payload" { value = terraform_data.d.output.payload }
