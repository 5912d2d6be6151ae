"""``accel config``'s questions: the prompts and each section of the questionnaire."""
