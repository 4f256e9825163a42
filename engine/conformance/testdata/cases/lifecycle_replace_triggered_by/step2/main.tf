variable "version_tag" {
  type    = string
  default = "v2"
}

resource "terraform_data" "release" {
  input = var.version_tag
}

resource "terraform_data" "stable" {
  input = "stable"
}

resource "terraform_data" "follower" {
  input = "follows the release"

  lifecycle {
    replace_triggered_by = [terraform_data.release]
  }
}

resource "terraform_data" "attr_follower" {
  input = "follows the stable input"

  lifecycle {
    replace_triggered_by = [terraform_data.stable.input]
  }
}
