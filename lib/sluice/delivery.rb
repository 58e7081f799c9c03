# frozen_string_literal: true

module Sluice
  # The delivery path of a produced message: the handle produce_async returns, the report it resolves to, and
  # the notifier that wakes who waits on it (the public names Sluice::Delivery::Handle and Sluice::Delivery::Report).
  module Delivery
  end
end
