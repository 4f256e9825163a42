resource "terraform_data" "native" {
  input = length(terraform_data.from_json)
}
