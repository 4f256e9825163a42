resource "terraform_data" "svc" {
  input = { replicas = 2, image = "nginx:1.27" }
}

check "replicas" {
  assert {
    condition     = terraform_data.svc.input.replicas >= 2
    error_message = "At least two replicas keep the service up."
  }
}

check "pinned_image" {
  assert {
    condition     = !endswith(terraform_data.svc.input.image, ":latest")
    error_message = "Images are pinned."
  }

  assert {
    condition     = length(split(":", terraform_data.svc.input.image)) == 2
    error_message = "An image has one tag."
  }
}

check "failing_is_a_warning" {
  assert {
    condition     = terraform_data.svc.input.replicas > 5
    error_message = "This check fails: Terraform warns and goes on."
  }
}
