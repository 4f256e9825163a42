variable "password" {
  type      = string
  default   = "hunter2-not-real"
  sensitive = true
}

resource "terraform_data" "login" {
  input = {
    user     = "admin"
    password = var.password
  }
}

output "length" { value = nonsensitive(length(var.password)) }
output "marked" { value = issensitive(var.password) }
output "unmarked" { value = issensitive("plain") }
output "wrapped" {
  value     = sensitive("made sensitive")
  sensitive = true
}
output "user" { value = terraform_data.login.input.user }
