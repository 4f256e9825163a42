variable "greeting" {
  type    = string
  default = "hi"
}

variable "names" { type = list(string) }

resource "terraform_data" "msg" {
  count = length(var.names)
  input = "${var.greeting}, ${var.names[count.index]}"
}

output "messages" { value = terraform_data.msg[*].input }
output "first" { value = var.names[0] }
