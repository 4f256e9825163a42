resource "terraform_data" "kept" {
  input = { owner = "team-b", size = 2 }

  lifecycle {
    ignore_changes = [input]
  }
}

resource "terraform_data" "changed" {
  input = "v2"
}

resource "terraform_data" "cbd" {
  triggers_replace = "r2"
  input            = "cbd"

  lifecycle {
    create_before_destroy = true
  }
}
