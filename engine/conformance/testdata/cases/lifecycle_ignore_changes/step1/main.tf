resource "terraform_data" "kept" {
  input = { owner = "team-a", size = 1 }

  lifecycle {
    ignore_changes = [input]
  }
}

resource "terraform_data" "changed" {
  input = "v1"
}

resource "terraform_data" "cbd" {
  triggers_replace = "r1"
  input            = "cbd"

  lifecycle {
    create_before_destroy = true
  }
}
