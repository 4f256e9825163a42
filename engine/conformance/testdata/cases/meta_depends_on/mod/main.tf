resource "terraform_data" "inner" {
  input = "inner"
}

output "v" { value = terraform_data.inner.input }
