"""What the command line and the demo print about a finished run (plain Python, no TensorFlow)."""


def print_summary(results):
    """Print the summary of a `train` results dict: data, size, time, test scores, examples."""
    print("\n=== Summary ===")
    print(f"data:       {results['data']}")
    print(f"parameters: {results['parameters']:,}")
    print(f"training:   {results['train_seconds']:.0f} s")
    test = results.get("test")
    if test:
        print(f"test BLEU:  {test['bleu']:.2f} (cased, 13a), {test['bleu_lowercase']:.2f} "
              f"(lower-cased); chrF {test['chrf']:.2f} on {test['num_sentences']} sentences")
    for reference, output in results.get("examples", []):
        print(f"  reference: {reference}\n  output:    {output}")
