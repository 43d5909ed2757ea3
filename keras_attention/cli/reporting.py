"""What the command line and the demo print about a finished run (plain Python, no TensorFlow)."""


def print_summary(results):
    """Print the summary of a `train` results dict: data, size, time, test scores, examples."""
    print("\n=== Summary ===")
    print(f"data:       {results['data']}")
    print(f"parameters: {results['parameters']:,}")
    evaluating = results.get("evaluation_seconds")
    print(f"training:   {results['train_seconds']:.0f} s"
          + (f" ({evaluating:.0f} s of it on the epochs' validation)" if evaluating is not None else ""))
    test = results.get("test")
    if test:
        print(f"test BLEU:  {test['bleu']:.2f} (cased, 13a), {test['bleu_lowercase']:.2f} "
              f"(lower-cased); chrF {test['chrf']:.2f} on {test['num_sentences']} sentences")
        if "bleu_signature" in test:
            print(f"  sacreBLEU signature (cased): {test['bleu_signature']}")
    for reference, output in results.get("examples", []):
        print(f"  reference: {reference}\n  output:    {output}")
