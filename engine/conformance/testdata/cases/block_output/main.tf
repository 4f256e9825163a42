resource "terraform_data" "a" {
  input = "alpha"
}

output "plain" {
  value       = "text"
  description = "A plain string."
}

output "number" { value = 42 }

output "object" {
  value = { a = 1, b = [true, false], c = null }
}

output "secret" {
  value     = "not-really-secret"
  sensitive = true
}

output "from_resource" {
  value = terraform_data.a.input
}

output "unknown_until_apply" {
  value = terraform_data.a.output
}

output "checked" {
  value = terraform_data.a.input

  precondition {
    condition     = length(terraform_data.a.input) > 3
    error_message = "The input is too short."
  }
}
