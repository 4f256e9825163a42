resource "terraform_data" "old" {
  input = "payload"
}

resource "terraform_data" "listed" {
  count = 2
  input = "n${count.index}"
}

module "inner" {
  source = "./mod"
}
