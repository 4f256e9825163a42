# A custom resource type registered from Git, with a default service token:
# stackd POSTs Create/Update/Delete requests there (the ROS/CloudFormation
# custom resource protocol) and the provider answers in the response body
# or later at the pre-signed ResponseURL (cfn-response works unchanged).
resource_type "Custom::DNSRecord" {
  service_token = "http://127.0.0.1:8080/hook"
}

stack_set "dns" {
  template = "./templates/dns"
  vars     = { zone = "internal.example" }

  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111"]
  }
}
